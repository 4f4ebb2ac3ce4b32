"""The story of a brief: the loop that sequences, the per-kind policies, the planner, follow-ups."""
