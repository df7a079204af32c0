# Interfaces of the RTL kernel csd_update, sourced by flows/rtl/package_xo.tcl.
# GENERATED from hls/include/csdkit/hls/update_args.h by csdkit_gen_flow_files;
# do not edit (flows/README.md).
set csd_kernel_name csd_update
set csd_kernel_vendor csdkit.org
set csd_kernel_library kernel
set csd_kernel_version 1.0
set csd_control_port s_axi_control
set csd_master_ports [list m_axi_gmem0 m_axi_gmem1 m_axi_gmem2 m_axi_gmem3 m_axi_gmem4 m_axi_gmem5 m_axi_gmem6]
