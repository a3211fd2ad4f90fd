"""Shared pieces of the typed configuration: the strict base model and the error type.

Every configuration model derives from :class:`Strict`: unknown keys are rejected
(``extra="forbid"``), values are not coerced across types (``strict=True`` except
where a field opts in), and models are immutable once validated.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

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


#: Upper bounds shared by several fields, each with the limit it comes from. A value beyond them is a unit slip
#: or a typo, and without a bound it would reach the planner (and JSON outputs) as an absurd number.
#: GKE allows at most 1,000 nodes per node pool per zone: no reservation or pool can usefully be larger.
MAX_NODES = 1000
#: The longest context any openly served model offers is 10 Mi tokens; more is a slip.
MAX_CONTEXT_TOKENS = 10_485_760
#: A Google Cloud project id: 6-30 characters, lower-case letters, digits and hyphens, starting with a letter.
PROJECT_ID_PATTERN = r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$"
#: An objective above 10 minutes is a slip (milliseconds written for seconds, or the reverse).
MAX_OBJECTIVE_MS = 600_000


class Strict(BaseModel):
    """Base of every config model: forbid unknown keys, no silent type coercion, no infinities or NaN, frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


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
