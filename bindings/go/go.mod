module detinfer

go 1.19
