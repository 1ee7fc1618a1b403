"""GS1 training: the advantage estimators, the client-side RL loop, the activation pilot and the local warm
start."""
