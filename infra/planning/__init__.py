"""Pure planning: the design's sizing formulas and the resolved stack plan (no Pulumi, no pydantic in the maths)."""
