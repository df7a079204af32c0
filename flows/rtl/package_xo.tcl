# Packages the RTL kernel csd_update (rtl/) as a Vitis kernel object (.xo) with Vivado:
#
#   vivado -mode batch -source flows/rtl/package_xo.tcl -tclargs \
#       XO PART KERNEL_XML PORTS_TCL WORK_DIR SOURCE...
#
#   XO          the .xo to write
#   PART        FPGA part of the platform (flows/Makefile asks platforminfo for it)
#   KERNEL_XML  flows/generated/kernel.xml (generated from the argument table)
#   PORTS_TCL   flows/generated/csd_update_ports.tcl (kernel name, VLNV, interface names)
#   WORK_DIR    scratch directory for the packaging projects and the IP
#   SOURCE...   the SystemVerilog files; the top module must be csd_update with the Vitis port
#               names: ap_clk, ap_rst_n, interrupt, s_axi_control_*, m_axi_<bundle>_*
#
# Steps: a throw-away project with the sources, IP packaging of the top (Vivado infers one AXI
# bus interface per port prefix), a check that every interface the argument table uses exists,
# clock association, the Vitis kernel properties, then package_xo with the generated kernel.xml.
# Nothing here names an interface: the list comes from PORTS_TCL, so the table stays the only
# place where bundles are written (the flows_consistency ctest checks this file for that).

proc die {msg} {
  puts stderr "package_xo.tcl: error: $msg"
  exit 1
}

if {$argc < 6} {
  die "usage: vivado -mode batch -source package_xo.tcl -tclargs XO PART KERNEL_XML PORTS_TCL WORK_DIR SOURCE..."
}
set xo_path    [file normalize [lindex $argv 0]]
set part       [lindex $argv 1]
set kernel_xml [file normalize [lindex $argv 2]]
set ports_tcl  [file normalize [lindex $argv 3]]
set work_dir   [file normalize [lindex $argv 4]]
set sources    [lrange $argv 5 end]

foreach f [list $kernel_xml $ports_tcl] {
  if {![file readable $f]} {
    die "cannot read $f (generate it: csdkit_gen_flow_files --out flows/generated)"
  }
}
foreach f $sources {
  if {![file readable $f]} { die "cannot read RTL source $f" }
}
if {$part eq ""} {
  die "no FPGA part given (set PART=..., or install the platform so platforminfo can report it)"
}

# Defines csd_kernel_name, csd_kernel_vendor/library/version, csd_control_port, csd_master_ports.
source $ports_tcl

set ip_dir      [file join $work_dir ip]
set pack_dir    [file join $work_dir pack_project]
set edit_dir    [file join $work_dir edit_project]
file delete -force $ip_dir $pack_dir $edit_dir
file mkdir $work_dir

# ---- 1. A project holding the RTL, top = the kernel ------------------------------------------
create_project -force -part $part csd_pack $pack_dir
add_files -norecurse $sources
set_property top $csd_kernel_name [current_fileset]
update_compile_order -fileset sources_1

# ---- 2. IP packaging of the top --------------------------------------------------------------
ipx::package_project -root_dir $ip_dir -vendor $csd_kernel_vendor -library $csd_kernel_library \
    -taxonomy /KernelIP -import_files -set_current false
ipx::unload_core [file join $ip_dir component.xml]
ipx::edit_ip_in_project -upgrade true -name csd_edit -directory $edit_dir \
    [file join $ip_dir component.xml]
set core [ipx::current_core]
set_property name $csd_kernel_name $core
set_property version $csd_kernel_version $core
set_property core_revision 1 $core

# Every interface the argument table uses must have been inferred from the port names.
set missing {}
foreach busif [concat [list $csd_control_port] $csd_master_ports] {
  if {[llength [ipx::get_bus_interfaces $busif -of_objects $core]] == 0} {
    lappend missing $busif
  }
}
if {[llength $missing] > 0} {
  set found {}
  foreach b [ipx::get_bus_interfaces -of_objects $core] { lappend found [get_property NAME $b] }
  die "the RTL top $csd_kernel_name lacks the interface(s) $missing (expected ports named\
       <interface>_awaddr ... <interface>_rdata); Vivado inferred: $found"
}
foreach busif [concat [list $csd_control_port] $csd_master_ports] {
  ipx::associate_bus_interfaces -busif $busif -clock ap_clk $core
}

# Vitis kernel properties: an RTL kernel driven through ap_ctrl_hs registers.
set_property sdx_kernel true $core
set_property sdx_kernel_type rtl $core
ipx::create_xgui_files $core
ipx::update_checksums $core
ipx::check_integrity -kernel $core
ipx::save_core $core
close_project -delete

# ---- 3. The kernel object, with the register map generated from the table ----------------------
file mkdir [file dirname $xo_path]
package_xo -force -xo_path $xo_path -kernel_name $csd_kernel_name -ip_directory $ip_dir \
    -kernel_xml $kernel_xml
puts "package_xo.tcl: wrote $xo_path"
