"""``mlx:<model_type>``: tiny mlx-lm models (placeholder until the model targets land)."""

MODEL_TYPES: tuple[str, ...] = ()


def make(rest: str, *, strict: bool = False):
    raise NotImplementedError(rest)
