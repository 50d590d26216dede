"""Imported first by every harness script that imports torch: the cyclic garbage collector is off
while the script's modules load. Importing torch makes hundreds of thousands of objects, none of
them garbage, and the collections that their count sets off are a fifth of the import's CPU time,
paid by each of an evaluation's processes. common.run_script() turns the collector back on, with
what the imports made moved out of its sight (gc.freeze), before any task or candidate code
runs. Only a harness script run as the program turns it off: a process that imports harness
modules as a library (a test, a benchmark) keeps its collector as it was."""

import gc
import os
import sys

_program = getattr(sys.modules.get("__main__"), "__file__", None)
if _program and os.path.dirname(os.path.realpath(_program)) == os.path.dirname(
        os.path.realpath(__file__)):
    gc.disable()
