"""A board request and the board as served (docs/boards.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from app.domain.identifiers import SUBJECT_DIGEST_PATTERN
from app.schemas.base import StrictModel
from app.schemas.common import AnyJSON, Identifier

SubjectDigest = Annotated[str, StringConstraints(pattern=SUBJECT_DIGEST_PATTERN)]
# The most subjects a board ranks (19,900 pairs).
MAX_SUBJECTS = 200


class BoardIn(StrictModel):
    """Rank the current gate reports of a suite version on one check."""

    suite: Identifier
    version: Identifier
    check_id: Identifier
    subjects: Annotated[list[SubjectDigest], Field(max_length=MAX_SUBJECTS)] | None = Field(
        default=None,
        description="the subject digests to rank (each with a current gate report under this "
        "suite version), or null for every subject that has one",
    )
    alpha: float = Field(
        default=0.05, gt=0, le=0.5, description="family-wise error rate of Holm's correction"
    )


class BoardOut(BaseModel):
    """A board: its identity, what it ranks, and its canonical body (section 2)."""

    board_id: str
    digest: str = Field(description="sha256 of the body's canonical JSON")
    attestation_digest: str = Field(description="sha256 of the DSSE envelope's bytes")
    check_id: str
    subjects: int = Field(description="how many subjects it ranks or excludes")
    created_at: str
    body: AnyJSON
    log_index: int | None = Field(default=None, description="its entry's index (on creation)")


class BoardListItem(BaseModel):
    """A board as a list shows it: no body, its suite version and its top group."""

    board_id: str
    digest: str
    attestation_digest: str
    check_id: str
    subjects: int
    created_at: str
    suite_ref: dict[str, str]
    top_group: list[str]


class BoardPage(BaseModel):
    """A page of boards, newest first."""

    boards: list[BoardListItem]
    next_cursor: str | None


class BoardLog(BaseModel):
    """A board's entry in the transparency log and its proof."""

    board_id: str
    index: int
    entry: AnyJSON
    checkpoint: str | None
    tree_size: int | None = None
    inclusion_proof: list[str] | None
