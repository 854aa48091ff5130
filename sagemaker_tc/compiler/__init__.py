"""The compiler runtime: compile policy, step/compile measurements and the per-job report.

Runs inside the training process and imports torch lazily.
"""
