"""Physical ranges of input numbers, as a problem states them (issue 50 item 3).

Every numeric field of models.records declares its bounds (gt/ge/lt/le); a value outside them
is a problem that states the whole range in the user's terms: "is 1e+30, outside its physical
range 0 < power_limit_mw <= 10,000" (a column converted at load, such as power_limit_mw,
gets its bounds in its own unit).
"""

from __future__ import annotations

import typing

from dcplace.models.records import Record

RANGE_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _number(x: float) -> str:
    return f"{int(x):,}" if abs(x) < 1e15 and float(x).is_integer() else f"{x:,.6g}"


def _annotated_metadata(annotation) -> list:
    """The constraints of an Annotated[type, Field(...)] (none for any other annotation)."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return []
    return [m for arg in typing.get_args(annotation)[1:] for m in getattr(arg, "metadata", [])]


def _field_bounds(model: type[Record], loc: list[str]):
    """(lower, lower_inclusive, upper, upper_inclusive) of the field at `loc` (None where open),
    read from its declaration; a {class: number} field's entries carry their own."""
    info = model.model_fields.get(loc[0]) if loc else None
    if info is None:
        return None
    metadata = list(info.metadata)
    if len(loc) > 1 and typing.get_origin(info.annotation) is dict:
        metadata = _annotated_metadata(typing.get_args(info.annotation)[1])
    elif not metadata:  # `Year | None`: the bounds sit on the Annotated inside the union
        metadata = [m for arg in typing.get_args(info.annotation) for m in _annotated_metadata(arg)]
    lower = upper = None
    lower_inclusive = upper_inclusive = True
    for m in metadata:
        for name, is_lower, inclusive in (("gt", True, False), ("ge", True, True), ("lt", False, False), ("le", False, True)):
            if getattr(m, name, None) is not None:
                if is_lower:
                    lower, lower_inclusive = float(getattr(m, name)), inclusive
                else:
                    upper, upper_inclusive = float(getattr(m, name)), inclusive
    return (lower, lower_inclusive, upper, upper_inclusive) if lower is not None or upper is not None else None


def range_text(model: type[Record], loc: list[str], column: str, factor: float = 1.0) -> str:
    """The field's range as the user reads it: '0 < power_limit_mw <= 10,000' (in the unit of the
    column the user gave: a converted column's bounds are divided by its factor)."""
    bounds = _field_bounds(model, loc)
    if bounds is None:
        return ""
    lower, lower_inclusive, upper, upper_inclusive = bounds
    text = column
    if lower is not None:
        text = f"{_number(lower / factor)} {'<=' if lower_inclusive else '<'} {text}"
    if upper is not None:
        text = f"{text} {'<=' if upper_inclusive else '<'} {_number(upper / factor)}"
    return text
