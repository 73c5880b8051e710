"""Training: gradient descent, gradient flow, ensembles, losses and what a run records.

One concept a module: :mod:`.run` (what both methods share), :mod:`.gd`, :mod:`.flow`
(with :mod:`.pacing`, its step-size controller), :mod:`.batching` (ensembles in one
compiled call), :mod:`.diagnosis` (divergence, spikes, stalls), :mod:`.ensemble` (named
members and their linear twins), :mod:`.twin_training`, :mod:`.losses`, :mod:`.trajectory`,
:mod:`.optimisers` (any optax optimiser, minibatches) and :mod:`.optimiser_twin` (its twin).
The names below are the training API the rest of the package imports.
"""

from .batching import LAYOUTS as LAYOUTS
from .batching import flow_ensemble as flow_ensemble
from .batching import gd_ensemble as gd_ensemble
from .diagnosis import SPIKE_FACTOR as SPIKE_FACTOR
from .diagnosis import DivergenceError as DivergenceError
from .diagnosis import FlowStallError as FlowStallError
from .diagnosis import LossSpikeWarning as LossSpikeWarning
from .flow import FlowConfig as FlowConfig
from .flow import flow as flow
from .flow import record_times as record_times
from .gd import GDConfig as GDConfig
from .gd import gd as gd
from .gd import record_steps as record_steps
from .trajectory import Trajectory as Trajectory
