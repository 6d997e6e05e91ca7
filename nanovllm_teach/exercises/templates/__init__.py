"""Student templates, one per exercise: copy one, replace each ``raise NotImplementedError`` with your code,
then grade it with ``nanovllm-teach grade EXERCISE your_copy.py`` (or ``check()`` in a notebook)."""
