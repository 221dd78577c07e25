"""The pool level: which nodes change in which wave, within budgets counted in GPUs and PDBs.

Pure, like planning/: each node's change is predicted from what its agent reports on the Node
(migagent.io/observed, with the pods on each GPU instance) and the same planner the agent runs;
waves are chosen from those predictions, the budgets and the rollout's state. The cluster is
reached only through the port the driver (driver.py) is given (kube/rollout_api.py in production).
"""
