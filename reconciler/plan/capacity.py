"""Capacity of one pool while planning: opened units, what is free on each, and gang placement. Internal,
mutable state of one `plan()` call.

A unit is a TPU slice or a node. TPU slices and the nodes of a multi-node GPU gang are taken whole. Jobs
smaller than a node share nodes: best fit (the opened node with the least free accelerators that still
holds the gang, ties to the lowest index), then a new node; replicas of one job go to distinct units, so
one node failure takes down at most one replica. Units 0..min-1 exist from the start (they are paid for);
`target` (the opened units) grows by one unit at a time up to `max`; the plan's target is `paid`: the
distinct units in use, at least min (a freed unit below a used one is not paid).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..resolve import ResolvedOption, ResolvedPool, pod_asks


@dataclass(frozen=True, slots=True)
class Gang:
    """What one replica of a job option takes from a pool: `units` whole units, or part of one unit."""

    whole_units: int          # > 0: this many entirely free units; 0: part of one unit
    accelerators: int         # per unit used
    cpus: int
    memory_gib: int


@dataclass(frozen=True, slots=True)
class Claim:
    """What a job that waits rather than preempt counts on (plan/claims.py): its gang on `units` of pool `pool_key`
    from `start` (hours from now) until `end` (None: it has no duration_hours)."""

    job: str
    priority: int
    pool_key: str
    units: tuple[int, ...]
    gang: Gang
    start: float
    end: float | None


def gang_for(opt: ResolvedOption, pool: ResolvedPool) -> Gang:
    if opt.shape is not None:
        return Gang(opt.slices, pool.unit_accelerators, 0, 0)
    if opt.count >= pool.unit_accelerators:
        return Gang(opt.count // pool.unit_accelerators, pool.unit_accelerators, 0, 0)
    if pool.provider == "slurm":    # slurm/submit.py asks no cpus or memory: only what the file states is counted
        return Gang(0, opt.count, opt.cpus or 0, opt.memory_gib or 0)
    return Gang(0, opt.count, *pod_asks(opt, pool, opt.count / pool.unit_accelerators))   # what render's pod asks


class PoolState:
    def __init__(self, pool: ResolvedPool, unit_hourly_usd: float, roomy: set[PoolState] | None = None) -> None:
        """`roomy`, if given, is a set shared by the pools of one accelerator: this pool is in it exactly when
        one of its opened units has free accelerators (the planner's index of pools that can take work
        without opening units)."""
        self.pool = pool
        self.roomy = roomy
        self.unit_hourly_usd = unit_hourly_usd
        self.cpus = pool.node_cpus if pool.node_cpus is not None else 1 << 30
        self.mem = pool.node_memory_gib if pool.node_memory_gib is not None else 1 << 30
        self.free_acc: list[int] = []
        self.free_cpu: list[int] = []
        self.free_mem: list[int] = []
        self.target = 0
        self.whole_free = 0       # opened units that are entirely free (kept up to date)
        self.max_free = 0         # the most free accelerators on one opened unit (kept up to date)
        self.blocked: frozenset[int] = frozenset()   # failed units: opened, full, never paid (plan/live.py)
        for _ in range(pool.min):
            self._open()

    def charge(self, gang: Gang, units: int) -> float:
        """What `units` of this pool's units, held by `gang`, cost its team per hour: the gang's share of each
        unit's price (the one measure of a team's spend and budget: `PlanState.attributed`)."""
        return self.unit_hourly_usd * gang.accelerators / self.pool.unit_accelerators * units

    def least_charge(self, gang: Gang, replicas: int) -> float:
        """A job's charge here before its units are found: `find` gives it max(1, whole units) per replica."""
        return self.charge(gang, max(1, gang.whole_units) * replicas)

    def block(self, units: Iterable[int]) -> None:
        """Make these units unavailable (failed): nothing fits on them and the pool does not pay for them."""
        blocked = frozenset(u for u in units if 0 <= u < self.pool.max)
        while self.target <= max(blocked, default=-1):
            self._open()
        for u in blocked:
            if self.free_acc[u] == self.pool.unit_accelerators:
                self.whole_free -= 1
            self.free_acc[u] = self.free_cpu[u] = self.free_mem[u] = 0
        self.blocked = self.blocked | blocked
        self._note()

    def _open(self) -> int:
        self.free_acc.append(self.pool.unit_accelerators)
        self.free_cpu.append(self.cpus)
        self.free_mem.append(self.mem)
        self.target += 1
        self.whole_free += 1
        self.max_free = self.pool.unit_accelerators
        if self.roomy is not None:
            self.roomy.add(self)
        return self.target - 1

    def may_fit(self, gang: Gang, replicas: int) -> bool:
        """A cheap necessary condition for `find` (most full pools are rejected here in O(1))."""
        room = self.pool.max - self.target
        if gang.whole_units:
            return gang.whole_units * replicas <= room + self.whole_free
        return replicas <= room or self.max_free >= gang.accelerators

    def is_full(self) -> bool:
        return self.target >= self.pool.max and not self.max_free

    def fits_without_opening(self, gang: Gang, replicas: int) -> bool:
        if gang.whole_units:
            return gang.whole_units * replicas <= self.whole_free
        return self.max_free >= gang.accelerators

    def _whole_free(self, exclude: set[int]) -> list[int]:
        full = self.pool.unit_accelerators
        return [i for i, f in enumerate(self.free_acc) if f == full and i not in exclude]

    def find(self, gang: Gang, replicas: int, *, dry_run: bool = True, first_fit: bool = False,
             exclude: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
        """Units for `replicas` gangs (whole units, or one unit per replica), or None if they do not fit.
        A part of a unit goes to the opened unit with the least room that holds it (best fit), or with
        `first_fit` to the lowest-index one; whole units are the lowest-index free ones, then new ones.
        With dry_run=False the units are taken (and opened as needed). `exclude`: units not to use (those of
        the job's other replicas in this pool, which must land on distinct units)."""
        chosen: list[int] = []
        taken: set[int] = set(exclude)
        fresh = (u for u in range(self.target, self.pool.max) if u not in taken)   # units not opened yet, in order
        for _ in range(replicas):
            if gang.whole_units:
                free = self._whole_free(taken)[: gang.whole_units]
                picks = free + [u for _, u in zip(range(gang.whole_units - len(free)), fresh, strict=False)]
                if len(picks) < gang.whole_units:
                    return None
            else:
                best = -1
                for i, f in enumerate(self.free_acc):
                    if i in taken or f < gang.accelerators or self.free_cpu[i] < gang.cpus \
                            or self.free_mem[i] < gang.memory_gib:
                        continue
                    if best < 0 or f < self.free_acc[best]:
                        best = i
                        if first_fit:
                            break
                if best < 0:
                    best = next(fresh, -1)
                    if best < 0 or gang.cpus > self.cpus or gang.memory_gib > self.mem:
                        return None
                picks = [best]
            taken.update(picks)
            chosen.extend(picks)
        if not dry_run:
            while self.target <= max(chosen, default=-1):
                self._open()
            self._allocate(chosen, gang)
        return tuple(sorted(chosen))

    def _allocate(self, units: list[int] | tuple[int, ...], gang: Gang) -> None:
        full = self.pool.unit_accelerators
        for i in units:
            if self.free_acc[i] == full:
                self.whole_free -= 1
            self.free_acc[i] -= gang.accelerators
            self.free_cpu[i] -= gang.cpus
            self.free_mem[i] -= gang.memory_gib
        self._note()

    def _note(self) -> None:
        self.max_free = max(self.free_acc, default=0)
        if self.roomy is not None:
            if self.max_free:
                self.roomy.add(self)
            else:
                self.roomy.discard(self)

    def can_take(self, units: tuple[int, ...], gang: Gang) -> bool:
        """Whether `take` would succeed: every unit below max, with the gang's accelerators, cpus and memory free
        (a unit not opened yet is entirely free)."""
        full = self.pool.unit_accelerators
        for u in units:
            if u >= self.pool.max:
                return False
            if u < self.target and (self.free_acc[u] < gang.accelerators or self.free_cpu[u] < gang.cpus
                                    or self.free_mem[u] < gang.memory_gib
                                    or (gang.whole_units and self.free_acc[u] != full)):
                return False
            if u >= self.target and (gang.cpus > self.cpus or gang.memory_gib > self.mem):
                return False
        return True

    def take(self, units: tuple[int, ...], gang: Gang) -> bool:
        """Take exactly these units (a kept placement); False if they are not free or beyond max."""
        if any(u >= self.pool.max for u in units):
            return False
        while self.target <= max(units, default=-1):
            self._open()
        if not self.can_take(units, gang):
            return False
        self._allocate(units, gang)
        return True

    def take_as_runs(self, units: tuple[int, ...], gang: Gang, runs_with: tuple[int | None, int | None] = (None, None),
                     ) -> Gang | None:
        """Take these units for a running job whose option now asks more cpus or memory per unit than they have
        free: the gang's accelerators and, of cpus and memory, what the job runs with (`runs_with`: what its pods
        request, observed) where it is known, else what its option asks; at most what every unit still has (what
        the job uses as it started, it had there). Before, it always took what its units had left when its
        option asked more, although its pods request less: a small job that fits beside it waited. Returns the
        gang taken; None (nothing taken) if a unit is beyond max or its accelerators are not free."""
        held = Gang(gang.whole_units, gang.accelerators, 0, 0)
        if not self.can_take(units, held):
            return None
        while self.target <= max(units, default=-1):
            self._open()
        cpus, mem = (gang.cpus if runs_with[0] is None else runs_with[0],
                     gang.memory_gib if runs_with[1] is None else runs_with[1]) if not gang.whole_units else (0, 0)
        held = Gang(gang.whole_units, gang.accelerators, min([cpus, *(self.free_cpu[u] for u in units)]),
                    min([mem, *(self.free_mem[u] for u in units)]))
        self._allocate(units, held)
        return held

    def release(self, units: tuple[int, ...], gang: Gang) -> None:
        full = self.pool.unit_accelerators
        for u in units:
            self.free_acc[u] += gang.accelerators
            self.free_cpu[u] += gang.cpus
            self.free_mem[u] += gang.memory_gib
            if self.free_acc[u] == full:
                self.whole_free += 1
        self._note()

    def trim(self, target: int) -> None:
        """Close the entirely free opened units above `target` (undoing a simulation that opened them)."""
        full = self.pool.unit_accelerators
        if self.target <= max(target, self.pool.min) or self.free_acc[-1] != full:
            return
        while self.target > max(target, self.pool.min) and self.free_acc[-1] == full:
            self.free_acc.pop()
            self.free_cpu.pop()
            self.free_mem.pop()
            self.target -= 1
            self.whole_free -= 1
        self._note()

    def open_to(self, target: int) -> None:
        """Open units up to `target` (undoing a `trim`)."""
        while self.target < min(target, self.pool.max):
            self._open()

    def used_units(self) -> int:
        full = self.pool.unit_accelerators
        if self.blocked:
            return sum(1 for i, f in enumerate(self.free_acc) if f < full and i not in self.blocked)
        return sum(1 for f in self.free_acc if f < full)

    def paid(self) -> int:
        """Units the pool pays for: the distinct units its jobs occupy, at least min. GPU nodes of a node group
        are interchangeable (a scale-in removes whichever the cloud picks) and a TPU slice is its own node pool,
        so a free unit below a used one is never paid (DESIGN.md section 4)."""
        return max(self.pool.min, self.used_units())

    def new_units(self, units: tuple[int, ...]) -> int:
        """How many more units the pool pays for once `units` (from `find`) are taken: those entirely free now
        (or not yet opened), less the min units no job uses yet."""
        full = self.pool.unit_accelerators
        fresh = sum(1 for u in set(units) if u >= self.target or self.free_acc[u] == full)
        if not fresh or not self.pool.min:
            return fresh
        used = self.used_units()
        return max(0, used + fresh - max(self.pool.min, used))

    def final_target(self) -> int:
        """The pool's target: the units it pays for (`paid`)."""
        return self.paid()
