"""Fixed helpers for model_new.py; read-only in the workspace."""
