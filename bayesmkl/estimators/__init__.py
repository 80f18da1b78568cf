"""The scikit-learn estimators of BM³KL: the classifier and the regressor."""
