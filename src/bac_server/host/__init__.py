"""Host preparation for namespace sandboxes: checks, cgroups, firewall table, sysctls.

Everything here is idempotent and is called by the server at start-up and by tests::

    from bac_server.host import prepare_host
    prepare_host()            # raises HostSetupError with advice when the host cannot work
"""

from ._cgroup_migrations import dynamic_migrations_favored
from ._cgroups import CgroupLayout, cgroup_layout, controller_dirs, supports_swap_limit
from ._cleanup import remove_tree, remove_trees, unmount_tree
from ._data_dir import secure_data_dir
from ._destinations import (
    Destinations,
    UnresolvedName,
    host_addresses,
    resolve,
    split_host,
)
from ._devices import SANDBOX_DEVICES, DeviceNode, HostDeviceTaken, check_device_nodes
from ._errors import HostChangeFailed, HostSetupError, MissingDependency, UnsafeDataDir
from ._forwarding import ensure_firewall
from ._ksm import enable_ksm
from ._lxcfs import LXCFS_DIR, ensure_lxcfs, lxcfs_files
from ._mounts import is_mount_point, mount_table, mounts_under
from ._nft import NftError, nft, nft_json
from ._nftables import (
    ALLOW_BOX,
    ALLOW_NET,
    ALLOW_POINT,
    DENY_BOX,
    DENY_NET,
    DENY_POINT,
    DNS_LISTENERS,
    EGRESS,
    EGRESS_PROXY_PORT,
    EXEMPT,
    HELD_SET,
    INFRA_DENY,
    LOG_NO_MAP,
    LOG_OK_MAP,
    OPEN,
    PIN_ANY,
    PIN_BOX,
    PIN_POINT,
    POINTS_PER_BOX,
    RX_MAP,
    SANDBOX_SETS,
    TABLE_FAMILY,
    TABLE_NAME,
    TX_MAP,
    KeyShape,
    SandboxSet,
    render_ruleset,
    table_present,
)
from ._paths import DEFAULT_DATA_DIR, IdRange, default_data_dir
from ._prepare import PARENT_CGROUP, HostReport, HostSettings, prepare_host
from ._private_files import remove_partial_writes, sync_directory, write_private

__all__ = [
    "ALLOW_BOX",
    "ALLOW_NET",
    "ALLOW_POINT",
    "DEFAULT_DATA_DIR",
    "DENY_BOX",
    "DENY_NET",
    "DENY_POINT",
    "DNS_LISTENERS",
    "EGRESS",
    "EGRESS_PROXY_PORT",
    "EXEMPT",
    "HELD_SET",
    "INFRA_DENY",
    "LOG_NO_MAP",
    "LOG_OK_MAP",
    "LXCFS_DIR",
    "OPEN",
    "PARENT_CGROUP",
    "PIN_ANY",
    "PIN_BOX",
    "PIN_POINT",
    "POINTS_PER_BOX",
    "RX_MAP",
    "SANDBOX_DEVICES",
    "SANDBOX_SETS",
    "TABLE_FAMILY",
    "TABLE_NAME",
    "TX_MAP",
    "CgroupLayout",
    "Destinations",
    "DeviceNode",
    "HostChangeFailed",
    "HostDeviceTaken",
    "HostReport",
    "HostSettings",
    "HostSetupError",
    "IdRange",
    "KeyShape",
    "MissingDependency",
    "NftError",
    "SandboxSet",
    "UnresolvedName",
    "UnsafeDataDir",
    "cgroup_layout",
    "check_device_nodes",
    "controller_dirs",
    "default_data_dir",
    "dynamic_migrations_favored",
    "enable_ksm",
    "ensure_firewall",
    "ensure_lxcfs",
    "host_addresses",
    "is_mount_point",
    "lxcfs_files",
    "mount_table",
    "mounts_under",
    "nft",
    "nft_json",
    "prepare_host",
    "remove_partial_writes",
    "remove_tree",
    "remove_trees",
    "render_ruleset",
    "resolve",
    "secure_data_dir",
    "split_host",
    "supports_swap_limit",
    "sync_directory",
    "table_present",
    "unmount_tree",
    "write_private",
]
