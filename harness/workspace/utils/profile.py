"""Compiles, verifies, then times model.py (eager and torch.compile) and model_new.py."""
import sys

from _stage import run_stage

sys.exit(run_stage("profile"))
