{{ install_snapshot "002" }}
