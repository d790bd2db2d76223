from ..checker.predictors import CLAIMS  # noqa: F401 (harness/params.py reads CLAIMS here)
