"""Shared pieces of the typed configuration: the strict base model and the error type.

Every configuration model derives from :class:`Strict`: unknown keys are rejected
(``extra="forbid"``), values are not coerced across types (``strict=True`` except
where a field opts in), and models are immutable once validated.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, BaseModel, ConfigDict

#: Pulumi config namespace of this project (``Pulumi.yaml`` ``name``).
NAMESPACE = "llm-serving"


class FieldErrors(ValueError):
    """Raised by cross-field validators: each problem names the field it belongs to, so the reported
    key path points at that field (``contract.max_model_len``) rather than at the enclosing section."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {msg}" for field, msg in problems))


def check(problems: list[tuple[str, str]]) -> None:
    """Raise :class:`FieldErrors` when a validator collected any ``(field, message)`` problems."""
    if problems:
        raise FieldErrors(problems)


class Strict(BaseModel):
    """Base of every config model: forbid unknown keys, no silent type coercion, frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


@dataclass(frozen=True, order=True)
class ConfigIssue:
    """One configuration problem: the full key path (``llm-serving:contract.max_output_tokens``) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Exception):
    """All problems found in one stack configuration, reported together."""

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = sorted(set(issues))
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{len(self.issues)} configuration error(s):"]
        lines += [f"  - {issue}" for issue in self.issues]
        return "\n".join(lines)

    @property
    def paths(self) -> list[str]:
        return [i.path for i in self.issues]
