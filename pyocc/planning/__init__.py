"""pyocc's static memory planner: buffers with live ranges -> offsets in one pool.

A plain library over plain data (no IR, no xDSL): describe buffers as
``Buffer(name, size, first, last, alignment)``, call ``plan_memory`` and get a
verified ``Plan``. ``plan_pools`` spreads buffers over several named pools
with size limits (pools.py). ``problem_to_json``/``plan_to_json`` and the ``plan-json``
command (cli.py) let other compilers use it through files. ``plan_symbolic``
plans buffers whose sizes are polynomials in symbols (a sequence length):
one plan, offsets as formulas, valid for every value in range, in a few
pieces (sub-ranges with their own layout) where one layout would waste
memory at some values (symbolic.py).
``fit_flexible`` sizes flexible buffers (kernel scratch) to a plan's slack, ``widen_flexible``
places some of them again larger (per-thread copies) (fit.py).
"""

from .bounds import lower_bound, max_live, naive_bytes, packed_lower_bound
from .fit import FittedPlan, fit_flexible, widen_flexible
from .planner import ALGORITHMS, plan_memory
from .pools import (
    POLICIES,
    MemoryPool,
    PoolOverflowError,
    PoolsPlan,
    parse_memory_pools,
    parse_pool_candidates,
    parse_size,
    plan_pools,
    verify_pools_plan,
)
from .problem import Buffer, Plan, PlanError, PlanningError, Problem, fitted_alignment
from .serialize import (
    plan_from_json,
    plan_to_json,
    pools_from_json,
    pools_plan_to_json,
    problem_from_json,
    problem_to_json,
    symbolic_plan_to_json,
    symbolic_problem_from_json,
)
from .symbolic import Piece, Poly, SymbolicBuffer, SymbolicPlan, SymbolicProblem, plan_symbolic, verify_symbolic_plan
from .verify import verify_plan

__all__ = [
    "ALGORITHMS",
    "POLICIES",
    "Buffer",
    "fitted_alignment",
    "FittedPlan",
    "fit_flexible",
    "widen_flexible",
    "MemoryPool",
    "PoolOverflowError",
    "PoolsPlan",
    "parse_memory_pools",
    "parse_pool_candidates",
    "parse_size",
    "plan_pools",
    "pools_from_json",
    "pools_plan_to_json",
    "verify_pools_plan",
    "Plan",
    "PlanError",
    "PlanningError",
    "Poly",
    "Problem",
    "SymbolicBuffer",
    "Piece",
    "SymbolicPlan",
    "SymbolicProblem",
    "lower_bound",
    "packed_lower_bound",
    "max_live",
    "naive_bytes",
    "plan_from_json",
    "plan_memory",
    "plan_to_json",
    "problem_from_json",
    "plan_symbolic",
    "problem_to_json",
    "symbolic_plan_to_json",
    "symbolic_problem_from_json",
    "verify_plan",
    "verify_symbolic_plan",
]
