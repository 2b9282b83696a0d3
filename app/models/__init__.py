"""SQLAlchemy tables; importing this module registers every table on Base.metadata."""

from app.models.base import Base
from app.models.definitions import DatasetVersion, Example, ScorerVersion, Suite, SuiteVersion
from app.models.evaluations import Case, Evaluation
from app.models.tenancy import ApiToken, Organization, Project

__all__ = [
    "ApiToken",
    "Base",
    "Case",
    "DatasetVersion",
    "Evaluation",
    "Example",
    "Organization",
    "Project",
    "ScorerVersion",
    "Suite",
    "SuiteVersion",
]
