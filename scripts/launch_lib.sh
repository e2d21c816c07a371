# Shared by scripts/run_two_node.sh and scripts/run_a3_8gpu.sh (sourced,
# not run): how a launcher's rank or --ssh turns into a role and a peer.

# Sets fwd to the caller's TCPX_P2P_*, TCPX_EMU_* and NCCL_* variables as
# NAME=VALUE words, less the per-host ones: what --ssh passes on.
tp_launch_forwarded_env() {
	local v

	fwd=()
	while IFS= read -r v; do
		case $v in TCPX_EMU_ADDR=* | TCPX_P2P_PEER=* | TCPX_P2P_SSH=*) ;; *) fwd+=("$v") ;; esac
	done < <(env | grep -E '^(TCPX_P2P_|TCPX_EMU_|NCCL_)[A-Za-z0-9_]*=' || true)
}

# Reads and sets the caller's role, peer and ssh_host; calls its die().
# Role auto: launcher rank 0 (OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK)
# is the server, 1 the client, whose peer is --peer, else TCPX_P2P_PEER,
# else (Slurm) the first node of SLURM_JOB_NODELIST.  --ssh HOST: this side
# is the client and HOST the default peer.
tp_launch_role() {
	local rank

	if [[ $role == auto ]]; then
		rank=${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-${PMI_RANK:-}}}
		case $rank in
		0) role=server ;;
		1) role=client ;;
		*) die "auto: launcher rank '${rank}' (OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK) is not 0 or 1: run 2 ranks, one per node" ;;
		esac
		if [[ $role == client && -z $peer && -n ${SLURM_JOB_NODELIST:-} ]] &&
			command -v scontrol >/dev/null 2>&1; then
			peer=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
		fi
	fi
	if [[ -n $ssh_host ]]; then
		[[ $role == client ]] || die "--ssh HOST starts the server there: this side must be the client"
		peer=${peer:-$ssh_host}
	fi
	[[ $role == client && -z $peer ]] && die "client needs --peer ADDR (or TCPX_P2P_PEER)"
	return 0
}
