"""Batch questions: a list of questions answered together, as a table with sources.

questions.py reads the list, runner.py answers it concurrently (so that the engine
can batch the work), export.py writes the table as CSV or Markdown. None of them
imports Qt: the CLI (`ragdoll ask --file`) and the window share them.
"""
