"""Process rewards: per-step credit learned online (implicit PRM), estimated by branching
(Monte-Carlo step values) or asked of a judge, fed to the estimators as a step term."""
