"""Kept so that bench/redaction_cost.py keeps importing: the fields pass lives in
service/domain/redaction/fields.py; new code imports it from there."""

from service.domain.redaction.fields import check_identifiers, redact_fields

__all__ = ["check_identifiers", "redact_fields"]
