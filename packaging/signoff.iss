; Inno Setup script: a per-user installer for the Windows bundle (dist\signoff\, made by
; packaging\signoff-windows.spec). No administrator rights: it installs into
; %LOCALAPPDATA%\Programs\Signoff, adds a Start menu entry for the tray app, and offers to put
; signoff.exe on the user's PATH and to start Signoff at sign-in. Not built on this project's
; machines (Linux only); the steps are in packaging/README.md:
;   iscc /DVersion=0.1.0 packaging\signoff.iss
; writes dist\signoff-0.1.0-windows-x64-setup.exe.

#ifndef Version
  #define Version "0.0.0"
#endif

[Setup]
AppId=dev.signoff.Signoff
AppName=Signoff
AppVersion={#Version}
AppPublisher=Signoff
AppComments=Approve what your AI agents do through MCP tools
; Per user: {autopf} is %LOCALAPPDATA%\Programs when the installer runs without elevation.
PrivilegesRequired=lowest
DefaultDirName={autopf}\Signoff
DisableProgramGroupPage=yes
DisableDirPage=auto
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\dist
OutputBaseFilename=signoff-{#Version}-windows-x64-setup
SetupIconFile=..\build\signoff.ico
UninstallDisplayIcon={app}\signoff-app.exe
UninstallDisplayName=Signoff
Compression=lzma2
SolidCompression=yes
WizardStyle=modern
ChangesEnvironment=yes
; Closes a running Signoff before its files are replaced.
CloseApplications=yes

[Tasks]
Name: "path"; Description: "Put the signoff command on my PATH (for terminals and MCP hosts)"
Name: "startup"; Description: "Start Signoff when I sign in"

[Files]
Source: "..\dist\signoff\*"; DestDir: "{app}"; Flags: recursesubdirs createallsubdirs ignoreversion

[Icons]
; The AppUserModelID is the one desktop-notifier registers for its toasts (its app name).
Name: "{userprograms}\Signoff"; Filename: "{app}\signoff-app.exe"; AppUserModelID: "Signoff"
Name: "{userstartup}\Signoff"; Filename: "{app}\signoff-app.exe"; Tasks: startup

[Registry]
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; \
    ValueData: "{olddata};{app}"; Tasks: path; Check: NotOnPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\signoff-app.exe"; Description: "Start Signoff"; Flags: nowait postinstall skipifsilent

[Code]
function NotOnPath(Dir: string): Boolean;
var
  Paths: string;
begin
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths) then
  begin
    Result := True;
    exit;
  end;
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Paths) + ';') = 0;
end;

{ Uninstalling takes the folder off the user's PATH again. Signoff's configuration, database
  and credential stay, as on Linux and macOS. }
procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Paths, Dir: string;
  P: Integer;
begin
  if CurUninstallStep <> usPostUninstall then
    exit;
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths) then
    exit;
  Dir := ExpandConstant('{app}');
  P := Pos(';' + Uppercase(Dir), Uppercase(Paths));
  if P > 0 then
  begin
    Delete(Paths, P, Length(Dir) + 1);
    RegWriteExpandStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths);
  end;
end;
