"""How a worker is launched and watched: the staged copy it runs from, a cold process or an early
one started before the recipe is read, the warm spare and its forks, speculative hinted captures,
the supervisor's deadline, memory cap and cancel, and the phase marks that say where time went."""
