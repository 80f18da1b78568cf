"""The BM³KL models: the classifier's and the regressor's pseudo-likelihoods, priors and bounds."""
