"""``python -m eventtime.spark.engine``: build (or find) the engine jar, print its path."""

from . import engine_jar

print(engine_jar(verbose=True))
