"""Everything a fitted :class:`~bayesmkl.BM3KLClassifier` does with its draws.

:class:`PosteriorMixin` holds the calibration map fitted at the end of ``fit``, prediction
(decision values, probabilities, labels), and the ArviZ views (DataTree, predictive DataTree,
k-fold LOO). It reads the fitted attributes ``posterior_``, ``kernel_input_``, ``classes_``,
``calibrator_``, ``log_likelihood_``, ``y_train_`` and the parameters ``calibration``,
``decision``, and ``gamma0_`` (the γ0 of the fit: changing the ``gamma0`` parameter after
fitting does not change predictions); it never samples.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import logsumexp
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    validate_data,
)

from bayesmkl.config import with_x64, x64_scope
from bayesmkl.estimators._validation import validate_labels
from bayesmkl.model.classification import signed_targets
from bayesmkl.model.likelihood import log_pseudo_likelihood_terms
from bayesmkl.posterior import calibration as _calibration
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior import loo as _loo
from bayesmkl.posterior.checks import check_decision_scale, check_predictions
from bayesmkl.posterior.predictive import (
    draw_decision_values,
    draw_log_probabilities,
    draw_probabilities,
    mean_decision,
)

__all__ = ["LOO_KHAT_WARN", "KernelDrawsMixin", "PosteriorMixin", "probability_mcse"]

#: ``calibration="loo"`` warns above this share of training points with Pareto k̂ > 0.7, and always
#: under the paper's prior, where the LOO map was measured far worse than the k-fold one. Under the
#: default prior 4–28% of points had k̂ > 0.7 on 7 UCI sets and the LOO map matched the 3-fold map
#: within 0.013 log-loss (benchmarks/results/calibration_loo.md).
LOO_KHAT_WARN = 0.3


def probability_mcse(P, n_chains: int) -> np.ndarray:
    """Monte Carlo standard error of the mean over draws of ``P: (S, M, K)``, whose S draws are
    ``n_chains`` chains stored one after the other; ``(M, K)``, 0 where P does not vary, and
    nan everywhere with a single draw per chain (no variation to measure, not a zero error)."""
    from arviz_stats.base import array_stats

    S = P.shape[0]
    if S // n_chains < 2:
        return np.full(P.shape[1:], np.nan)
    x = np.moveaxis(P.reshape(n_chains, S // n_chains, *P.shape[1:]), (0, 1), (-2, -1))
    varying = np.ptp(P, axis=0) > 1e-12
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.asarray(array_stats.mcse(x, chain_axis=-2, draw_axis=-1, method="mean"))
    return np.where(varying, se, 0.0)


class KernelDrawsMixin:
    """Test kernels and flat draws of (w, a, b): what every BM3KL estimator's predictions
    start from (the classifier's :class:`PosteriorMixin`, the regressor's
    :class:`~bayesmkl.posterior.regression.RegressionPosteriorMixin`). Reads
    ``posterior_``, ``kernel_input_`` and, for feature input, ``n_features_in_``."""

    def _test_kernels(self, X):
        """Cross kernels ``(P, M, N)`` of new data (validated)."""
        check_is_fitted(self, "posterior_")
        if self.kernel_input_.pool is None:
            Kt = check_array(
                X,
                allow_nd=True,
                ensure_2d=False,
                dtype=(np.float64, np.float32),
                input_name="K_test",
            )
            return self.kernel_input_.cross(Kt)
        Xv = validate_data(self, X, dtype=np.float64, reset=False)
        return self.kernel_input_.cross(Xv)

    def _flat_draws(self):
        """``w (S, P), a (S, C, N), b (S, C)`` with chains and draws merged (S = chains·draws)."""
        post = self.posterior_
        return tuple(post[k].reshape((-1,) + post[k].shape[2:]) for k in ("w", "a", "b"))


class PosteriorMixin(KernelDrawsMixin):
    """Calibration, prediction and ArviZ output of :class:`~bayesmkl.BM3KLClassifier`."""

    def _fit_calibration(self, K, y, sample_weight=None, reuse_map=False):
        """Calibration map and training log-likelihood (called once, at the end of :meth:`fit`).

        Sets ``calibrator_`` (``None`` for ``calibration=None``), ``oof_log_predictive_`` (the
        calibrated log predictive of each training point under the fold fit that held it out)
        and ``log_likelihood_`` ``(chains, draws, N)``: per draw, the log probability of each
        training label under the fitted rule. ``K`` are the training kernels ``(P, N, N)``;
        ``sample_weight`` the effective weights of :meth:`fit` (or ``None``): the fold refits
        use them and the map minimises the weighted held-out log-loss. ``reuse_map``: keep
        ``calibrator_`` and ``oof_log_predictive_`` of the fit that a ``warm_start`` fit
        continued (only ``log_likelihood_`` is recomputed).
        """
        _, codes = validate_labels(y, len(y))
        if not reuse_map:
            self.calibrator_ = None
            self.oof_log_predictive_ = None
        if self.calibration == "loo" and not reuse_map:
            self.calibrator_, self.oof_log_predictive_ = self._loo_calibration(
                K, codes, sample_weight
            )
        elif self.calibration is not None and not reuse_map:
            n_folds = _calibration.DEFAULT_FOLDS if self.calibration == "cv" else self.calibration
            draws, index = _calibration.crossfit_decision_draws(
                self, K, y, n_folds=int(n_folds), seed=self.random_seed_,
                sample_weight=sample_weight,
            )  # fmt: skip
            fold_codes = [codes[i] for i in index]
            pw = None if sample_weight is None else [sample_weight[i] for i in index]
            self.calibrator_ = _calibration.fit_calibrator(
                draws, fold_codes, gamma0=self.gamma0_, n_folds=len(draws),
                point_weights=pw, per_class=True,  # per class for C ≥ 2 classifiers
            )  # fmt: skip
            oof = np.empty(len(codes))
            for F, i, c in zip(draws, index, fold_codes, strict=True):
                lp = self.calibrator_.log_proba_draws(F)[:, np.arange(len(c)), c]
                oof[i] = _calibration.log_predictive(lp)
            self.oof_log_predictive_ = oof
        w, a, b = self._flat_draws()
        F = np.asarray(draw_decision_values(w, a, b, K))
        check_decision_scale(F, training=True)
        lp = self._log_proba_draws(F)[:, np.arange(len(codes)), codes]
        chains, draws_per_chain = self.posterior_["w"].shape[:2]
        self.log_likelihood_ = lp.reshape(chains, draws_per_chain, len(codes))

    def _loo_calibration(self, K, codes, sample_weight):
        """``calibration="loo"``: the map fitted on PSIS-LOO-weighted training draws, and each
        training point's calibrated leave-one-out log predictive (no refit)."""
        w, a, b = self._flat_draws()
        F = np.asarray(draw_decision_values(w, a, b, K))  # (S, N, C)
        delta = signed_targets(codes, len(self.classes_), self.binary_mode)
        with x64_scope():
            terms = log_pseudo_likelihood_terms(
                np.swapaxes(F, 1, 2), delta[None], self.gamma0_, sample_weight
            )
            log_lik = np.asarray(terms).sum(axis=1)  # (S, N)
        log_w, khat = _loo.psis_log_weights(log_lik)
        cal = _loo._calibrator_from_weights(
            F, codes, log_w, khat, gamma0=self.gamma0_, point_weights=sample_weight,
            per_class=True,
        )  # fmt: skip
        if F.shape[0] < _loo.MIN_PSIS_DRAWS:
            warnings.warn(
                f"calibration='loo': {F.shape[0]} posterior draws are too few for Pareto "
                f"smoothing (it needs {_loo.MIN_PSIS_DRAWS}); the probability map was fitted on "
                "unsmoothed leave-one-out weights and may be overconfident. Raise num_samples, "
                "or use calibration='cv'.",
                UserWarning,
                stacklevel=4,
            )
        elif cal.khat_bad_frac > LOO_KHAT_WARN or getattr(self, "prior", None) == "paper":
            warnings.warn(
                f"calibration='loo': {cal.khat_bad_frac:.0%} of the training points have Pareto "
                f"k > {_calibration.KHAT_BAD}, so their leave-one-out weights are unreliable and "
                "the probability map may be overconfident; calibration='cv' refits instead "
                "(3 more fits). Under prior='paper' the LOO map is known to be poor.",
                UserWarning,
                stacklevel=4,
            )
        lp = cal.log_proba_draws(F)[:, np.arange(len(codes)), codes]
        return cal, logsumexp(lp + log_w, axis=0)

    # ------------------------------------------------------------------------------------
    # prediction
    # ------------------------------------------------------------------------------------

    @with_x64
    def decision_draws(self, X) -> np.ndarray:
        """Per-draw decision values f.

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``

        Returns
        -------
        ndarray (S, M, C)
            S = chains · draws, chain-major.

        Raises ``NonFinitePredictionError`` for non-finite values and warns
        (``ExtremeDecisionWarning``) for rows whose ``|f|`` exceeds 1e8 (the margin is at 1): their
        test kernels or features lie far outside the training range.
        """
        Kt = self._test_kernels(X)
        w, a, b = self._flat_draws()
        F = draw_decision_values(w, a, b, Kt)
        F = check_predictions(F, "decision values", posterior=self.posterior_)
        check_decision_scale(F)
        return F

    def _calibrator(self):
        cal = getattr(self, "calibrator_", None)
        if cal is None:
            raise ValueError(
                f"calibration={self.calibration!r} but this classifier was fitted without a "
                "calibration map; refit it, or set_params(calibration=None) for the raw rule"
            )
        return cal

    def _log_proba_draws(self, F) -> np.ndarray:
        """Per-draw log probabilities ``(S, M, K)`` of decision draws ``F: (S, M, C)``."""
        if self.calibration is None:
            return np.asarray(draw_log_probabilities(F, self.gamma0_))
        return self._calibrator().log_proba_draws(F)

    def _proba_draws_of(self, F) -> np.ndarray:
        """Per-draw probabilities ``(S, M, K)`` of decision draws ``F: (S, M, C)`` (checked)."""
        if self.calibration is None:
            P = draw_probabilities(F, self.gamma0_)
        else:
            P = np.exp(self._calibrator().log_proba_draws(F))
        return check_predictions(P, "probabilities")

    @with_x64
    def proba_draws(self, X) -> np.ndarray:
        """Per-draw predictive probabilities ``(S, M, K)`` (each row sums to 1).

        Calibrated (see ``calibration``), or with ``calibration=None`` the raw σ(ψ(f)) /
        softmax(ψ(f)) of docs/math.md §6.
        """
        return self._proba_draws_of(self.decision_draws(X))

    @with_x64
    def predict_proba(self, X, return_mcse: bool = False):
        """Posterior predictive class probabilities (docs/math.md §6, P1).

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``
        return_mcse : bool, default False
            Also return the Monte Carlo standard error of each probability: the error of the
            posterior mean that comes from using finitely many, autocorrelated draws
            (sd / √ESS with ArviZ's ESS of the mean over the chains; Vehtari et al. 2021). A
            decision that turns on a difference smaller than a few MCSE needs a longer run.

        Returns
        -------
        proba : ndarray (M, K)
            Mean over draws of the per-draw probabilities (:meth:`proba_draws`: calibrated, or
            the normalised pseudo-likelihood with ``calibration=None``); rows sum to 1.
        mcse : ndarray (M, K)
            Only with ``return_mcse=True``. 0 where a probability does not vary over draws;
            nan with a single draw per chain.
        """
        P = self.proba_draws(X)
        proba = P.mean(axis=0)
        if not return_mcse:
            return proba
        return proba, probability_mcse(P, self.posterior_["w"].shape[0])

    @with_x64
    def predict_log_proba(self, X) -> np.ndarray:
        """Log of :meth:`predict_proba`, by log-sum-exp over draws (finite, no log of 0).

        Returns
        -------
        ndarray (M, K)
        """
        return _calibration.log_predictive(self._log_proba_draws(self.decision_draws(X)), axis=0)

    @with_x64
    def decision_function(self, X) -> np.ndarray:
        """Posterior-mean decision values.

        Returns
        -------
        ndarray (M,) for the single binary classifier (positive = ``classes_[1]``), else
        (M, C).
        """
        F = np.asarray(mean_decision(self.decision_draws(X)))
        return F[:, 0] if F.shape[1] == 1 else F

    @with_x64
    def predict(self, X) -> np.ndarray:
        """Predicted labels ``(M,)``.

        ``decision="proba"``: ``classes_[argmax predict_proba(X)]`` (docs/math.md P2);
        ``decision="mean_f"``: argmax of the mean decision value (sign for one binary
        classifier).
        """
        if self.decision == "mean_f":
            F = self.decision_function(X)
            idx = (F > 0).astype(int) if F.ndim == 1 else np.argmax(F, axis=1)
        else:
            idx = np.argmax(self.predict_proba(X), axis=1)
        return self.classes_[idx]

    # ------------------------------------------------------------------------------------
    # ArviZ, save/load
    # ------------------------------------------------------------------------------------

    def to_datatree(self, posterior_predictive: bool = False, *, X=None, random_state=0):
        """The fit as an ArviZ ``xarray.DataTree`` (see :mod:`bayesmkl.posterior.diagnostics`).

        Parameters
        ----------
        posterior_predictive : bool, default False
            Add ``posterior_predictive.y``: per draw, replicated training labels drawn from
            that draw's predictive probabilities at the training points (those of
            :meth:`proba_draws`: calibrated unless ``calibration=None``; for ArviZ's posterior
            predictive checks, e.g. ``arviz_plots.plot_ppc_pava``, ``plot_ppc_rootogram``).
            Costs one prediction of the N training points (the training kernels are rebuilt
            from the pool).
        X : array (N, d), or array (P, N, N) with ``kernels="precomputed"``, optional
            The training data, needed with precomputed kernels (the fit keeps no kernels);
            with a pool the stored training points are used when ``X`` is None.
        random_state : int, numpy Generator or None, default 0
            Seed of the replicated labels.

        Returns
        -------
        xarray.DataTree
            ``posterior`` (w, e with a ``kernel`` dimension; a, b, lam, nu, varsigma with
            ``class``/``obs``), ``sample_stats`` (acceptance_rate, diverging, lp,
            step_size), ``observed_data`` (y), ``log_likelihood`` (y: per draw, the log
            probability of each training label under the fitted rule, calibrated unless
            ``calibration=None`` at fit time), so ``arviz.loo`` and ``arviz.compare`` run on it,
            and optionally ``posterior_predictive`` (y). ArviZ's PSIS treats the
            ``log_likelihood`` values as the posterior's own likelihood factors; the sampler's
            posterior holds the pseudo-likelihood instead, and the estimate is optimistic (see
            :meth:`loo_kfold`). With ``calibration=None`` ``arviz.loo`` usually fails ("All
            tail values are the same"); :meth:`loo` says why (the group's attribute
            ``psis_loo`` too). ``sample_stats`` has no ``energy`` (see
            :mod:`bayesmkl.posterior.diagnostics`), so ``arviz.plot_energy`` does not apply.
        """
        check_is_fitted(self, "posterior_")
        tree = diagnostics.build_datatree(
            self.posterior_,
            self.sample_stats_,
            kernel_names=self.kernel_names_,
            classes=self.classes_,
            y=self.y_train_,
            log_likelihood=getattr(self, "log_likelihood_", None),
            attrs={
                "inference_library": "bayesmkl (BM3KL Gibbs sampler in NumPyro)",
                "sampler": str(self.sampler),
            },
        )
        if not posterior_predictive:
            return tree
        return diagnostics.add_posterior_predictive(
            tree, self._train_proba_draws(X), self.classes_, random_state=random_state
        )

    @with_x64
    def _train_proba_draws(self, X=None) -> np.ndarray:
        """Per-draw probabilities of the training points, ``(chains, draws, N, K)``."""
        pool = self.kernel_input_.pool
        if X is not None:
            P = self.proba_draws(X)
        elif pool is not None:
            w, a, b = self._flat_draws()
            F = check_predictions(
                draw_decision_values(w, a, b, pool.train_kernels()),
                "decision values",
                posterior=self.posterior_,
            )
            P = self._proba_draws_of(F)
        else:
            raise ValueError(
                "with kernels='precomputed' the fit keeps no training kernels: pass them, "
                "to_datatree(posterior_predictive=True, X=K_train) with K_train (P, N, N)"
            )
        if P.shape[1] != self.kernel_input_.n_train:
            raise ValueError(
                f"X has {P.shape[1]} points but the model was trained on "
                f"{self.kernel_input_.n_train}: posterior predictive checks need the training data"
            )
        chains, draws = self.posterior_["w"].shape[:2]
        return P.reshape((chains, draws) + P.shape[1:])

    def loo(self, **kwargs):
        """PSIS-LOO of the training labels, ``arviz.loo(clf.to_datatree())``, or a refusal.

        Refuses (``ValueError``, with the reason and what to do) where PSIS cannot use the
        log-likelihood and ``arviz.loo`` itself fails with "All tail values are the same": with
        ``calibration=None`` most training points have probability 1 to machine precision in
        every draw (see :func:`bayesmkl.posterior.diagnostics.loo_problem`). Where it runs it is
        optimistic for BM3KL; prefer :meth:`loo_kfold`. ``kwargs`` go to ``arviz.loo``.

        Returns
        -------
        arviz_stats.ELPDData
        """
        check_is_fitted(self, "posterior_")
        return diagnostics.loo(self.to_datatree(), **kwargs)

    def loo_kfold(self):
        """K-fold cross-validated ELPD of the training labels, as an ArviZ result.

        Reuses the cross-fitting of ``calibration`` (no new fits): ``elpd_i`` is the calibrated
        log predictive of training point i under the fold fit that held it out. Pass several
        to ``arviz.compare({"pool A": clf_a.loo_kfold(), "pool B": clf_b.loo_kfold()})`` to
        compare kernel pools or hyper-parameters.

        Prefer it to ``arviz.loo(clf.to_datatree())``, which runs but is optimistic for BM3KL:
        under the paper's prior PSIS reweights posterior draws in which every training point
        is fitted at margin ≈ 1, so it barely moves (measured on Heart: PSIS elpd/N = −0.06,
        k-fold −0.42, test log-loss 0.40; see :mod:`bayesmkl.posterior.calibration`).

        Returns
        -------
        arviz_stats.ELPDDataLOOKFold
        """
        check_is_fitted(self, "posterior_")
        if getattr(self, "oof_log_predictive_", None) is None or self.calibrator_.n_folds < 2:
            raise ValueError(
                "loo_kfold needs a fit calibrated by cross-fitting (calibration='cv' or an int); "
                "with calibration='loo' the PSIS-LOO log predictives are in oof_log_predictive_"
            )
        return _loo.kfold_elpd(
            self.oof_log_predictive_, self.log_likelihood_, self.calibrator_.n_folds
        )

    @with_x64
    def predict_datatree(self, X):
        """:meth:`to_datatree` plus a ``predictions`` group: per-draw probabilities of ``X``.

        Returns
        -------
        xarray.DataTree
            ``predictions.proba`` has dims ``(chain, draw, obs, class)``.
        """
        P = self.proba_draws(X)
        chains, draws = self.posterior_["w"].shape[:2]
        P = P.reshape((chains, draws) + P.shape[1:])
        return diagnostics.add_predictions(self.to_datatree(), P, self.classes_)
