"""Pulumi programs, one per provider, fed only by the stack specs that `fleet render` writes.

The programs arrive with the render/apply work (DESIGN.md section 5, steps 5 and 9); until then this package
holds nothing but this description, and no command uses it.
"""
