"""
workingctx benchmarks: ``python -m benchmarks`` prints one table.
"""
