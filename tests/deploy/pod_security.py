"""The Pod Security Standards' baseline and restricted profiles, checked on a pod spec.

The controls, fields and allowed values are those of
https://kubernetes.io/docs/concepts/security/pod-security-standards/ (policy version v1.30 and
later, without the relaxations the UserNamespacesPodSecurityStandards feature gate allows). The
Pod Security admission controller is the authority; this is the same list, so a manifest that
breaks it fails here rather than at ``kubectl apply`` time on a cluster.

:func:`violations` returns one line per breach, ``"<control>: <field> = <value>"``; an empty
list means the pod would be admitted at that level.
"""

from __future__ import annotations

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
LEVELS = ("privileged", "baseline", "restricted")


def _containers(pod: dict) -> list[tuple[str, dict]]:
    out = []
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for index, container in enumerate(pod.get(field) or []):
            out.append((f"spec.{field}[{index}]", container))
    return out


def _baseline(pod: dict, annotations: dict) -> list[str]:
    found = []
    pod_sc = pod.get("securityContext") or {}
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        found.append("HostProcess: spec.securityContext.windowsOptions.hostProcess = true")
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(f"Host Namespaces: spec.{field} = true")
    for index, volume in enumerate(pod.get("volumes") or []):
        if "hostPath" in volume:
            found.append(f"HostPath Volumes: spec.volumes[{index}].hostPath = {volume['hostPath']}")
    profile = (pod_sc.get("appArmorProfile") or {}).get("type")
    if profile not in (None, "RuntimeDefault", "Localhost"):
        found.append(f"AppArmor: spec.securityContext.appArmorProfile.type = {profile}")
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            found.append(f"AppArmor: metadata.annotations[{key}] = {value}")
    if (pod_sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append("Seccomp: spec.securityContext.seccompProfile.type = Unconfined")
    found += _selinux("spec.securityContext", pod_sc)
    for index, sysctl in enumerate(pod_sc.get("sysctls") or []):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(
                f"Sysctls: spec.securityContext.sysctls[{index}].name = {sysctl.get('name')}"
            )
    for where, container in _containers(pod):
        sc = container.get("securityContext") or {}
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"HostProcess: {where}.securityContext.windowsOptions.hostProcess = true")
        if sc.get("privileged"):
            found.append(f"Privileged Containers: {where}.securityContext.privileged = true")
        added = set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            found.append(
                f"Capabilities: {where}.securityContext.capabilities.add = {sorted(added)}"
            )
        for port_index, port in enumerate(container.get("ports") or []):
            if port.get("hostPort"):
                found.append(
                    f"Host Ports: {where}.ports[{port_index}].hostPort = {port['hostPort']}"
                )
        profile = (sc.get("appArmorProfile") or {}).get("type")
        if profile not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"AppArmor: {where}.securityContext.appArmorProfile.type = {profile}")
        found += _selinux(f"{where}.securityContext", sc)
        if sc.get("procMount") not in (None, "Default"):
            found.append(f"/proc Mount Type: {where}.securityContext.procMount = {sc['procMount']}")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"Seccomp: {where}.securityContext.seccompProfile.type = Unconfined")
    return found


def _selinux(where: str, sc: dict) -> list[str]:
    options = sc.get("seLinuxOptions") or {}
    found = []
    if options.get("type", "") not in SELINUX_TYPES:
        found.append(f"SELinux: {where}.seLinuxOptions.type = {options['type']}")
    for field in ("user", "role"):
        if options.get(field):
            found.append(f"SELinux: {where}.seLinuxOptions.{field} = {options[field]}")
    return found


def _restricted(pod: dict) -> list[str]:
    found = []
    pod_sc = pod.get("securityContext") or {}
    for index, volume in enumerate(pod.get("volumes") or []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(
                f"Volume Types: spec.volumes[{index}] = {sorted(kinds - RESTRICTED_VOLUMES)}"
            )
    pod_non_root = pod_sc.get("runAsNonRoot")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    if pod_non_root is False:
        found.append("Running as Non-root: spec.securityContext.runAsNonRoot = false")
    if pod_sc.get("runAsUser") == 0:
        found.append("Running as Non-root user: spec.securityContext.runAsUser = 0")
    if pod_seccomp not in (None, "RuntimeDefault", "Localhost"):
        found.append(f"Seccomp: spec.securityContext.seccompProfile.type = {pod_seccomp}")
    for where, container in _containers(pod):
        sc = container.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(
                f"Privilege Escalation: {where}.securityContext.allowPrivilegeEscalation = "
                f"{sc.get('allowPrivilegeEscalation')} (must be false)"
            )
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and pod_non_root is not True):
            found.append(
                f"Running as Non-root: {where}.securityContext.runAsNonRoot = {non_root} "
                f"(and the pod's is {pod_non_root})"
            )
        if sc.get("runAsUser") == 0:
            found.append(f"Running as Non-root user: {where}.securityContext.runAsUser = 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp is None and pod_seccomp is None:
            found.append(
                f"Seccomp: {where}.securityContext.seccompProfile.type unset (and the pod's too)"
            )
        elif seccomp not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"Seccomp: {where}.securityContext.seccompProfile.type = {seccomp}")
        capabilities = sc.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(
                f"Capabilities: {where}.securityContext.capabilities.drop = "
                f"{capabilities.get('drop')} (must include ALL)"
            )
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            found.append(
                f"Capabilities: {where}.securityContext.capabilities.add = {sorted(added)}"
            )
    return found


def violations(
    pod: dict, level: str = "restricted", *, annotations: dict | None = None
) -> list[str]:
    """The breaches of ``level`` (``baseline`` or ``restricted``) by the pod spec ``pod``.

    Args:
        pod: a PodSpec (a pod's or a pod template's ``spec``), as a dict.
        annotations: the pod's annotations (the AppArmor annotation is checked there).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}; one of {', '.join(LEVELS)}")
    if level == "privileged":
        return []
    found = _baseline(pod, annotations or {})
    if level == "restricted":
        found += _restricted(pod)
    return found


def strictest_level(pod: dict, *, annotations: dict | None = None) -> str:
    """The strictest level whose admission would accept ``pod``."""
    for level in reversed(LEVELS):
        if not violations(pod, level, annotations=annotations):
            return level
    return "privileged"
