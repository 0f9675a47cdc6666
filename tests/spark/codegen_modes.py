"""Run a test with Spark's generated code (fallback off: a compile error fails the test instead
of falling back silently to interpreted evaluation) or without code generation (each
expression's own ``eval``). Used for the engine's Catalyst expressions (FoldExpression,
BatchValue, RowBytes)."""

from __future__ import annotations

from contextlib import contextmanager

CODEGEN_MODES = {
    "generated": {"spark.sql.codegen.fallback": "false"},
    "interpreted": {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"},
}


@contextmanager
def codegen_mode(spark, mode: str):
    """The session's settings for ``mode`` (a key of CODEGEN_MODES), restored afterwards. A
    streaming query takes them when it starts."""
    previous = {name: spark.conf.get(name, None) for name in CODEGEN_MODES[mode]}
    for name, value in CODEGEN_MODES[mode].items():
        spark.conf.set(name, value)
    try:
        yield mode
    finally:
        for name, value in previous.items():
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)
