"""Compiles kernels/ into the library model_new.py loads; prints the first compiler error."""
import sys

from _stage import run_stage

sys.exit(run_stage("compile"))
