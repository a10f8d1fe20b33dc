"""XGBoost cost model (TVM's ``autotvm.tuner.xgboost_cost_model``).

Configs are turned into feature vectors: "knob" (the knob values), "itervar" (loop-nest features of the
lowered program, :mod:`kiln.autotvm.feature`) or "curve" (sampled buffer-access curves). Boosted trees
are trained to predict normalized throughput ("reg") or relative order ("rank", "rank-binary"), with
early stopping on the average top-k recall over the training set.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from ...error import KilnError
from .metric import average_recall
from .model_based_tuner import CostModel, FeatureCache
from .. import feature
from ...target.target import Target

logger = logging.getLogger("autotvm")
xgb = None


def _import_xgboost():
    global xgb
    if xgb is None:
        try:
            import xgboost
        except ImportError as err:
            raise ImportError("XGBoost is required for XGBTuner / XGBoostCostModel; kiln's autotvm extra "
                              'installs its CPU build: pip install "kiln-compiler[autotvm]"') from err
        xgb = xgboost
    return xgb


_BASE_PARAMS = {"max_depth": 3, "gamma": 0.0001, "min_child_weight": 1, "subsample": 1.0, "eta": 0.3,
                "lambda": 1.0, "alpha": 0, "verbosity": 0}


def _feature_of(task, index: int, fea_type: str) -> np.ndarray:
    """The feature vector of config ``index`` of ``task``."""
    config = task.config_space.get(index)
    if fea_type == "knob":
        return config.get_flatten_feature()
    return _config_feature(task, task.target, config, fea_type)


def _config_feature(task, target, config, fea_type: str) -> np.ndarray:
    """Loop-nest ("itervar"/"curve") features of ``task`` instantiated with ``config``."""
    target = Target.canon_target(target) if target is not None else None
    if target is not None:
        with target:
            sch, args = task.instantiate(config)
    else:
        sch, args = task.instantiate(config)
    if fea_type == "itervar":
        fea = feature.get_itervar_feature_flatten(sch, args, take_log=True)
    elif fea_type == "curve":
        fea = feature.get_buffer_curve_sample_flatten(sch, args, sample_n=20)
    else:
        raise KilnError(f"invalid feature type {fea_type!r}")
    other = [float(v) for v in config.get_other_option().values() if isinstance(v, (int, float, np.number))]
    return np.concatenate((np.asarray(fea, dtype=np.float32), np.asarray(other, dtype=np.float32)))


class _RecallEarlyStopping:
    """xgboost callback: stop when the training-set average recall@N has not improved for
    ``stopping_rounds`` rounds; remembers the best iteration."""

    def __init__(self, dtrain, labels, n: int, stopping_rounds: int, log_interval: int | None):
        base = _import_xgboost().callback.TrainingCallback
        parent = self

        class _CB(base):
            def after_iteration(self, model, epoch, evals_log):
                return parent._after_iteration(model, epoch)

        self.callback = _CB()
        self.dtrain = dtrain
        self.labels = labels
        self.n = max(1, n)
        self.stopping_rounds = stopping_rounds
        self.log_interval = log_interval
        self.best_score = -np.inf
        self.best_iteration = 0

    def _after_iteration(self, model, epoch: int) -> bool:
        preds = model.predict(self.dtrain, iteration_range=(0, epoch + 1))
        score = average_recall(preds, self.labels, self.n)
        if score > self.best_score:
            self.best_score, self.best_iteration = score, epoch
        if self.log_interval and epoch % self.log_interval == 0:
            logger.debug("XGB iter: %3d\ttr-a-recall@%d: %.6f", epoch, self.n, score)
        return epoch - self.best_iteration >= self.stopping_rounds


class XGBoostCostModel(CostModel):
    """``feature_type``: "knob", "itervar" or "curve"; ``loss_type``: "reg", "rank" or "rank-binary"."""

    def __init__(self, task, feature_type: str, loss_type: str = "reg", num_threads: int | None = None,
                 log_interval: int = 25, upper_model=None):
        super().__init__()
        _import_xgboost()
        self.task = task
        self.target = task.target
        self.space = task.config_space
        self.fea_type = feature_type
        self.loss_type = loss_type
        self.num_threads = num_threads
        self.log_interval = log_interval
        if feature_type not in ("knob", "itervar", "curve"):
            raise KilnError(f"invalid feature_type {feature_type!r}: expected 'knob', 'itervar' or 'curve'")
        if loss_type == "reg":
            self.xgb_params = dict(_BASE_PARAMS, objective="reg:squarederror")
        elif loss_type in ("rank", "rank-binary"):
            self.xgb_params = dict(_BASE_PARAMS, objective="rank:pairwise")
        else:
            raise KilnError(f"invalid loss_type {loss_type!r}: expected 'reg', 'rank' or 'rank-binary'")
        # Training sets here are small (hundreds of rows): one thread is faster than many, and stays
        # well-behaved on a busy machine. num_threads overrides.
        self.xgb_params["nthread"] = num_threads or 1
        self.bst = None
        self.feature_cache = upper_model.feature_cache if upper_model else FeatureCache()
        self.upper_model = upper_model
        self.base_model = None
        self._sample_size = 0
        self.fea_len = None

    # -- features ------------------------------------------------------------------------
    def _get_feature(self, indexes, length: int | None = None) -> np.ndarray:
        if self.feature_cache.size(self.fea_type) >= 100000:
            self.feature_cache.clear(self.fea_type)
        cache = self.feature_cache.get(self.fea_type)
        indexes = [int(i) for i in np.asarray(indexes).ravel()]
        for idx in indexes:
            if idx not in cache:
                try:
                    cache[idx] = _feature_of(self.task, idx, self.fea_type)
                except Exception as exc:  # an invalid config gets a zero feature, as in TVM
                    logger.debug("feature extraction failed for config %d: %s", idx, exc)
                    cache[idx] = None
        # Loop nests of different configs can differ in depth (a split by 1 vanishes): rows are
        # zero-padded (or cut) to one length, fixed at fit time for later predictions.
        if length is None:
            lens = [cache[i].shape[-1] for i in indexes if cache[i] is not None]
            length = max(lens) if lens else 1
        ret = np.zeros((len(indexes), length), dtype=np.float32)
        for row, idx in enumerate(indexes):
            fea = cache[idx]
            if fea is not None:
                n = min(length, fea.shape[0])
                ret[row, :n] = fea[:n]
        return ret

    def _labels(self, ys) -> np.ndarray:
        y = np.asarray(ys, dtype=np.float64)
        y = y / max(float(np.max(y)) if len(y) else 0.0, 1e-8)
        if self.loss_type == "rank-binary":
            y = (y > 0).astype(np.float64)  # pairwise rank on binarized labels: valid vs failed
        return y

    def _base_model_discount(self) -> float:
        return 1.0 / (2 ** (self._sample_size / 64.0))

    def _train(self, x, y, plan_size: int, num_boost_round: int, stopping_rounds: int, base_margin=None):
        index = np.random.permutation(len(x))
        dtrain = xgb.DMatrix(x[index], y[index], nthread=self.xgb_params["nthread"])
        if base_margin is not None:
            dtrain.set_base_margin(base_margin[index])
        stopper = _RecallEarlyStopping(dtrain, y[index], plan_size, stopping_rounds, self.log_interval)
        bst = xgb.train(self.xgb_params, dtrain, num_boost_round=num_boost_round, callbacks=[stopper.callback])
        return bst[: stopper.best_iteration + 1]

    # -- CostModel API ---------------------------------------------------------------------
    def fit(self, xs, ys, plan_size: int) -> None:
        tic = time.time()
        x_train = self._get_feature(xs)
        self.fea_len = x_train.shape[1]
        y_train = self._labels(ys)
        self._sample_size = len(x_train)
        margin = None
        if self.base_model:
            discount = self._base_model_discount()
            if discount < 0.05:  # enough own data: stop using the base model
                self.base_model.upper_model = None
                self.base_model = None
            else:
                margin = discount * self.base_model.predict(xs, output_margin=True)
        self.bst = self._train(x_train, y_train, plan_size, 8000, 20, margin)
        logger.debug("XGB train: %.2f\tobs: %d\terror: %d\tn_cache: %d", time.time() - tic, len(xs),
                     len(xs) - int(np.sum(y_train > 0)), self.feature_cache.size(self.fea_type))

    def fit_log(self, records, plan_size: int, min_seed_records: int = 500) -> bool:
        """Train on earlier records of the same template (any workload): features of each record are
        extracted from its own task, so knowledge transfers across shapes."""
        tic = time.time()
        xs, ys = [], []
        knob_len = len(self.space.get(0).get_flatten_feature())
        for inp, res in records:
            if inp.task.name != self.task.name:
                continue
            try:
                y = 0.0 if res.error_no != 0 else (inp.task.flop or self.task.flop or 1.0) / np.mean(res.costs)
                if self.fea_type == "knob":
                    x = inp.config.get_flatten_feature()
                    if len(x) != knob_len:
                        continue
                else:
                    x = _config_feature(inp.task, inp.target, inp.config, self.fea_type)
            except Exception:  # a record this process cannot instantiate: skip it
                continue
            xs.append(np.asarray(x, dtype=np.float32))
            ys.append(y)
        if len(xs) < max(1, min_seed_records):
            return False
        length = max(len(x) for x in xs)
        x_train = np.zeros((len(xs), length), dtype=np.float32)
        for i, x in enumerate(xs):
            x_train[i, :len(x)] = x
        self.fea_len = length
        y_train = self._labels(ys)
        self.bst = self._train(x_train, y_train, plan_size * 2, 400, 100)
        logger.debug("XGB train (transfer): %.2f\tobs: %d", time.time() - tic, len(xs))
        return True

    def predict(self, xs, output_margin: bool = False) -> np.ndarray:
        if self.bst is None:
            raise KilnError("XGBoostCostModel.predict called before fit")
        feas = self._get_feature(xs, self.fea_len)
        dtest = xgb.DMatrix(feas, nthread=self.xgb_params["nthread"])
        if self.base_model:
            dtest.set_base_margin(self._base_model_discount() * self.base_model.predict(xs, output_margin=True))
        return self.bst.predict(dtest, output_margin=output_margin)

    def load_basemodel(self, base_model) -> None:
        self.base_model = base_model
        self.base_model.upper_model = self

    def spawn_base_model(self) -> "XGBoostCostModel":
        return XGBoostCostModel(self.task, self.fea_type, self.loss_type, self.num_threads, self.log_interval,
                                self)

    def _close_pool(self) -> None:
        """Features are extracted in-process; nothing to close (kept for TVM API compatibility)."""
