"""Fleet's engine: a pipeline of pure stages over frozen models, with side effects at the edges.

sources (read) -> load -> validate -> plan -> render -> diff -> cost -> report -> apply (effect).
"""

__version__ = "0.1.0"
