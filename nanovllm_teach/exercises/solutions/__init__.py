"""Reference solutions, one per exercise: what the engine itself does. Every grader passes them."""
