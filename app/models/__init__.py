"""SQLAlchemy tables; importing this module registers every table on Base.metadata."""

from app.models.base import Base
from app.models.bundles import Bundle
from app.models.definitions import DatasetVersion, Example, ScorerVersion, Suite, SuiteVersion
from app.models.evaluations import Case, CaseOutput, Evaluation
from app.models.peers import Notification, Peer
from app.models.reports import (
    CheckResult,
    EvidenceManifest,
    Incident,
    Report,
    ReportEnvelope,
    ReportVerification,
)
from app.models.signing import ReportAttestation, SigningKey, SupersessionAttestation
from app.models.tenancy import ApiToken, Organization, Project
from app.models.web_sessions import WebSession

__all__ = [
    "ApiToken",
    "Base",
    "Bundle",
    "Case",
    "CaseOutput",
    "CheckResult",
    "DatasetVersion",
    "Evaluation",
    "EvidenceManifest",
    "Example",
    "Incident",
    "Notification",
    "Organization",
    "Peer",
    "Project",
    "Report",
    "ReportAttestation",
    "ReportEnvelope",
    "ReportVerification",
    "ScorerVersion",
    "SigningKey",
    "Suite",
    "SuiteVersion",
    "SupersessionAttestation",
    "WebSession",
]
