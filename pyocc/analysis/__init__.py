"""Analyses: facts about IR (liveness, aliases, costs). They never rewrite."""
