"""Compiles, then checks model_new.py against model.py on fresh random inputs."""
import sys

from _stage import run_stage

sys.exit(run_stage("verify"))
