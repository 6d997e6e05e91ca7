"""Execution layer: model definitions (Qwen3) written on the package's own layers."""
