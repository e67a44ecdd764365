"""Worker: one running instance of the fleet.

``Workers`` (``workers.py``): its lifecycle, claim lanes and pacing, slots claimed ahead, fleet
holds, the registry beacon, runtime schedules, the workflow releaser, maintenance loops, health
endpoints and the blocking facade. It starts executions (the execution wing) and imports
plumbing and the domain; never the client's insides.
"""
