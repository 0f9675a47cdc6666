"""Checking runs against the semantics, outside the engine: ``scenario`` (the scenario files of
``eventtime replay``, run through the reference model, rendered and compared) and
``conservation`` (every input row counted once in the results and late-data tables).

Built on ``core`` only (no Spark); ``conservation`` reads the tables with pandas.
"""
