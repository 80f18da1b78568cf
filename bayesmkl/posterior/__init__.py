"""Pure functions of posterior draws and kernels: decision values, probabilities, calibration,
LOO, draw checks and the ArviZ DataTree."""
