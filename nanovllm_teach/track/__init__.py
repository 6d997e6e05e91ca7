"""The build-it-yourself track: a learner writes the engine's model path again, chapter by chapter.

Role: teaching, beside the engine (it imports the engine; nothing in the engine imports it).
"""
