"""Pure numeric kernels: the dynamics of Eqs. 2-4, the scores, the worker threads."""
