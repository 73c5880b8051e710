"""Training: the one discrete-time loop, gradient flow, ensembles, losses and what a run records.

One concept a module: :mod:`.trainer` (``train``: gradient descent and any optax optimiser, full
batch or minibatches, ensembles, the linear twin side by side), :mod:`.loop` (its one compiled
program), :mod:`.train_config` (the one record of a discrete run), :mod:`.flow`
(true gradient flow on diffrax, with :mod:`.pacing`, its step-size controller), :mod:`.run`
(what both share), :mod:`.batching` (how an ensemble's members share the machine; gradient
flow's ensemble), :mod:`.diagnosis` (divergence, spikes, stalls), :mod:`.ensemble` (named
members and their linear twins), :mod:`.optimiser_twin` (the twin's optimiser),
:mod:`.losses`, :mod:`.trajectory`; :mod:`.legacy` keeps 0.1's entry points for one release.
"""

from .batching import LAYOUTS as LAYOUTS
from .batching import flow_ensemble as flow_ensemble
from .diagnosis import SPIKE_FACTOR as SPIKE_FACTOR
from .diagnosis import DivergenceError as DivergenceError
from .diagnosis import FlowStallError as FlowStallError
from .diagnosis import LossSpikeWarning as LossSpikeWarning
from .ensemble import Member as Member
from .ensemble import Runs as Runs
from .flow import FlowConfig as FlowConfig
from .flow import flow as flow
from .flow import record_times as record_times
from .legacy import gd as gd
from .legacy import gd_ensemble as gd_ensemble
from .legacy import gd_members as gd_members
from .optimiser_twin import optimiser_twin as optimiser_twin
from .train_config import GDConfig as GDConfig
from .train_config import TrainConfig as TrainConfig
from .train_config import record_steps as record_steps
from .trainer import train as train
from .trajectory import Trajectory as Trajectory
