"""Training: advantage estimators (GRPO, GiGPO, process rewards), losses, the trainer loop.

(Arrives with the trainer work; the package exists so the layout and the namespace are fixed.)
"""
